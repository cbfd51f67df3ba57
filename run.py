"""Train and evaluate any model of the runner: python run.py --model=MGFormer --dataset=ml-100k"""

from recbole_mgformer.cli import main

if __name__ == "__main__":
    main()
